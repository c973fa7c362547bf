"""A Harbor task upload read as a stream within bounds: however far a small upload would expand, no more than the
task's size is ever inflated or held; task.toml and Dockerfiles that cannot be read are refused, never a crash."""

from __future__ import annotations

import functools
import gzip
import random
import tarfile
import tracemalloc
import zlib
from typing import Literal

import pytest

from domain.harbor_task import (
    AFTER_THE_END,
    MAX_ENTRIES,
    MAX_EXTENDED_HEADER_BYTES,
    MAX_PAX_RECORDS,
    MAX_TASK_TAR_BYTES,
    MAX_TREE_BYTES,
    TAR_RECORD_BYTES,
    TaskRefused,
    read_dockerfile,
    read_task_archive,
)
from domain.json_depth import MAX_JSON_DEPTH

MB = 1024 * 1024
BOMB_MB = 640
BASE = (("t/instruction.md", b"Do it."), ("t/tests/test.sh", b"echo 1 > /logs/verifier/reward.txt"))
OVER = "the task is over 16 MB uncompressed"


def header(
    name: str, size: int, kind: bytes = tarfile.REGTYPE, tar_format: Literal[0, 1, 2] = tarfile.USTAR_FORMAT
) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    return info.tobuf(tar_format)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % tarfile.BLOCKSIZE)


def files(*entries: tuple[str, bytes]) -> bytes:
    """Tar entries (header, data, padding) with no end-of-archive blocks, byte for byte."""
    return b"".join(header(name, len(data)) + padded(data) for name, data in entries)


END = bytes(2 * tarfile.BLOCKSIZE)  # a tar's end-of-archive blocks
NOISE = random.Random(1).randbytes(4000)  # what gzip cannot shrink


def gzipped(*parts: bytes, zeros_mb: int = 0, after: bytes = b"") -> bytes:
    """`parts`, then `zeros_mb` MB of zeros, then `after`, gzip-compressed as they are made (the zeros never whole)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31, 9, zlib.Z_RLE)  # as small as the default, twice as fast
    out = [deflate.compress(part) for part in parts]
    block = bytes(MB)
    out += [deflate.compress(block) for _ in range(zeros_mb)]
    out += [deflate.compress(after), deflate.flush()]
    return b"".join(out)


def held_mb(data: bytes) -> tuple[float, str]:
    """The most memory (MB) reading `data` held at once, and the refusal it answered."""
    tracemalloc.start()
    try:
        with pytest.raises(TaskRefused) as refused:
            read_task_archive(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / MB, str(refused.value)


HEADER_OVER = f"the upload has a tar header of more than {MAX_EXTENDED_HEADER_BYTES} bytes"
BOMBS = {  # how each is made, and the refusal
    # The bomb: a valid task and one 640 MB entry of zeros (its size in its header).
    "entry": (lambda: gzipped(files(*BASE), header("t/zeros", BOMB_MB * MB), zeros_mb=BOMB_MB, after=END), OVER),
    # Sizes no file's header gives: zeros after the archive's end, a pax header and a GNU long name of 640 MB.
    "after the end": (lambda: gzipped(files(*BASE), END, zeros_mb=BOMB_MB), AFTER_THE_END),
    "pax header": (lambda: gzipped(header("t/x", BOMB_MB * MB, tarfile.XHDTYPE), zeros_mb=BOMB_MB), HEADER_OVER),
    "long name": (
        lambda: gzipped(header("././@LongLink", BOMB_MB * MB, tarfile.GNUTYPE_LONGNAME), zeros_mb=BOMB_MB),
        HEADER_OVER,
    ),
}


@functools.cache
def bomb(kind: str) -> bytes:
    return BOMBS[kind][0]()


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", list(BOMBS))
def test_a_gzip_bomb_is_refused_holding_no_more_than_the_task_size(kind):
    assert len(bomb(kind)) < MB  # 0.62 MB that would expand to 640
    peak_mb, says = held_mb(bomb(kind))
    assert BOMBS[kind][1] in says
    assert peak_mb < 2.5 * MAX_TREE_BYTES / MB, f"{peak_mb:.0f} MB held reading a {kind} bomb"


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME])
def test_a_long_header_is_refused_before_it_is_read(kind):
    whole = files(*BASE) + header("t/x", 2 * MAX_EXTENDED_HEADER_BYTES, kind) + padded(b"9 a=b\n" * 30_000) + END
    with pytest.raises(TaskRefused, match=HEADER_OVER):
        read_task_archive(whole)


@pytest.mark.bad_input
def test_the_entry_bomb_is_refused_from_its_header_naming_the_entry():
    with pytest.raises(TaskRefused) as refused:
        read_task_archive(bomb("entry"))
    assert refused.value.entry == "t/zeros" and OVER in refused.value.says


def exactly(total: int) -> bytes:
    """A valid task whose tar, uncompressed, is exactly `total` bytes (a multiple of 512)."""
    head = files(*BASE)
    filler = total - len(head) - len(END) - tarfile.BLOCKSIZE  # the filler's own header
    return head + files(("t/filler", bytes(filler))) + END


def test_the_bound_is_exactly_the_task_size_plus_one_block():
    assert MAX_TASK_TAR_BYTES == MAX_TREE_BYTES + 512
    fits = exactly(MAX_TASK_TAR_BYTES)
    for body in (fits, gzip.compress(fits)):
        filler = read_task_archive(body).get("filler")
        assert filler is not None and len(filler.data) == MAX_TREE_BYTES - 4 * 512 - 1024  # 3 headers, 2 paddings
    for body in (fits + bytes(512), gzip.compress(fits + bytes(512))):  # one block more, if only zeros
        with pytest.raises(TaskRefused, match=OVER):
            read_task_archive(body)


@pytest.mark.bad_input
def test_entries_past_the_count_are_refused_before_their_data_is_read():
    many = files(*BASE, *((f"t/e{i}", b"") for i in range(MAX_ENTRIES)))
    with pytest.raises(TaskRefused, match=f"more than {MAX_ENTRIES} entries"):
        read_task_archive(gzipped(many, header("t/zeros", BOMB_MB * MB), zeros_mb=BOMB_MB))


@pytest.mark.bad_input
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (gzip.compress(files(*BASE, ("t/cut", NOISE)) + END)[:-400], "not a readable tar.gz"),
        (files(*BASE, ("t/cut", NOISE))[:-2048], "not a tar archive"),
        (gzip.compress(files(*BASE) + END) + b"garbage", "not a readable tar.gz"),
        (files(*BASE) + header("t/neg", -5, tar_format=tarfile.GNU_FORMAT) + END, "not a tar archive"),
        (files(*BASE) + header("t/sparse", 10, tarfile.GNUTYPE_SPARSE) + END, "a sparse file is not allowed"),
    ],
    ids=["truncated tar.gz", "truncated tar", "garbage after the gzip", "negative size", "sparse file"],
)
def test_an_archive_that_is_cut_or_crafted_is_refused(body, says):
    with pytest.raises(TaskRefused, match=says):
        read_task_archive(body)


@pytest.mark.parametrize("gzipped_", [True, False], ids=["tar.gz", "tar"])
def test_a_records_padding_after_the_end_is_read_and_anything_past_it_refused_unread(gzipped_):
    padded = files(*BASE) + END + b"\0" * (TAR_RECORD_BYTES - len(END))  # as tar writes it: whole records
    over = padded + b"\0" * TAR_RECORD_BYTES  # a record more than tar writes
    pack = gzip.compress if gzipped_ else bytes
    assert read_task_archive(pack(padded)).get("instruction.md") is not None
    with pytest.raises(TaskRefused, match=AFTER_THE_END):
        read_task_archive(pack(over))


def task_with(toml: str) -> bytes:
    return gzip.compress(files(*BASE, ("t/task.toml", toml.encode())) + END)


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "toml",
    [
        "a = " + "[" * 5000 + "]" * 5000,
        "a = " + "{b = " * 5000 + "1" + "}" * 5000,
        "a = " + "[{b = " * 2500 + "1" + "}]" * 2500,
        "a = " + "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
    ],
    ids=["arrays 5000 deep", "inline tables 5000 deep", "both 5000 deep", "arrays 65 deep"],
)
def test_a_task_toml_nested_too_deeply_is_refused_naming_the_nesting(toml):
    with pytest.raises(TaskRefused) as refused:
        read_task_archive(task_with(toml))
    assert refused.value.entry == "task.toml"
    assert f"nests arrays or inline tables more than {MAX_JSON_DEPTH} levels deep" in refused.value.says


def test_brackets_in_strings_and_comments_are_no_nesting():
    text = (
        'a = "' + "[" * 100 + '"\n'
        "b = '" + "{" * 100 + "'\n"
        'c = """\n' + "[" * 100 + '\n"""\n'
        "# " + "[" * 100 + "\n"
        "[metadata]\n"
        'difficulty = "[[easy]]"\n'
        "d = " + "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH + "\n"
    )
    tree = read_task_archive(task_with(text))
    assert tree.get("task.toml") is not None


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "dockerfile",
    [
        "FROM x\nRUN\n",
        "FROM x\nWORKDIR\n",
        "FROM x\nCOPY\n",
        "FROM x\nCOPY []\n",
        "FROM x\nCOPY --chown=1\n",
        "FROM x\nADD\n",
        'FROM x\nENV A="unterminated\n',
        "FROM x\nENV A 'x\n",
        "FROM x\nRUN echo \udcff\n",  # a lone surrogate: the parser's Go side would crash the process
        "FROM x\nRUN [1, 2]\n",
        "FROM x\nRUN <<EOF\necho hi\n",
        "FROM x\nRUN " + "a" * 70_000 + "\n",
        "# escape=x\nFROM x\n",
        "\x00",
    ],
    ids=[
        "lone RUN",
        "lone WORKDIR",
        "lone COPY",
        "COPY []",
        "COPY flags only",
        "lone ADD",
        "ENV open quote",
        "ENV open single quote",
        "surrogate",
        "RUN of numbers",
        "unterminated heredoc",
        "line of 70,000",
        "bad escape",
        "NUL only",
    ],
)
def test_a_dockerfile_that_cannot_be_read_is_refused_naming_it(dockerfile):
    with pytest.raises(TaskRefused) as refused:
        read_dockerfile(dockerfile)
    assert refused.value.entry == "environment/Dockerfile" and refused.value.says.startswith("cannot be parsed"), (
        refused.value
    )


def pax_record(key: str) -> bytes:
    """One pax record, `<length> <key>=\\n`, its length counting itself."""
    body = f" {key}=\n".encode()
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


@pytest.mark.bad_input
def test_a_global_pax_header_copied_into_every_entry_is_refused_at_the_first():
    records = b"".join(pax_record(f"k{i}") for i in range(MAX_PAX_RECORDS + 1))
    entries = files(*BASE, *((f"t/e{i}", b"") for i in range(MAX_ENTRIES - 10)))
    whole = header("pax_global_header", len(records), tarfile.XGLTYPE) + padded(records) + entries + END
    with pytest.raises(TaskRefused) as refused:
        read_task_archive(gzip.compress(whole))
    assert refused.value.entry == "t/instruction.md"
    assert f"more than {MAX_PAX_RECORDS} pax records" in refused.value.says


@pytest.mark.bad_input
@pytest.mark.parametrize("name", [b"t/tests/\xff.sh", b"\xff/instruction.md"])
def test_a_path_that_is_not_utf8_is_refused(name):
    entry = bytearray(header("placeholder", 1))
    entry[:100] = name.ljust(100, b"\0")
    entry[148:156] = b" " * 8
    entry[148:156] = b"%06o\0 " % sum(entry)  # the header's checksum, over the new name
    whole = (files(*BASE) if name.startswith(b"t/") else b"") + bytes(entry) + padded(b"x") + END
    with pytest.raises(TaskRefused) as refused:
        read_task_archive(gzip.compress(whole))
    assert refused.value.entry == name.decode("utf-8", "replace")
    assert "a path that is not UTF-8 is not allowed" in refused.value.says
