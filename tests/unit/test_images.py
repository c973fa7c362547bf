"""Where a base image comes from: the Debian mirror this machine's apt sources name."""

from __future__ import annotations

import pytest

from worker.images import ImageUnavailable, apt_sources, debian_mirror

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main

Types: deb-src
URIs: http://sources.example/debian
Suites: trixie
Components: main

Enabled: no
Types: deb
URIs: http://disabled.example/debian
Suites: trixie
"""


@pytest.fixture
def apt_dir(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(DEB822)
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian sid main\ndeb [arch=amd64] http://old.example/debian bullseye main\n"
    )
    return tmp_path


def test_both_formats_are_read_in_apt_order_and_only_enabled_deb_entries(apt_dir):
    assert apt_sources(apt_dir) == [
        ("http://old.example/debian", ("bullseye",)),
        ("http://mirror.example/debian", ("bookworm", "bookworm-updates")),
        ("http://mirror.example/debian-security", ("bookworm-security",)),
    ]


def test_the_mirror_listing_the_suite_is_chosen_else_the_first_of_debians_main_archive(apt_dir):
    assert debian_mirror("bookworm", apt_dir) == "http://mirror.example/debian"
    assert debian_mirror("bullseye", apt_dir) == "http://old.example/debian"
    assert debian_mirror("trixie", apt_dir) == "http://old.example/debian"  # not the deb-src nor the disabled one


def test_no_debian_source_at_all_says_where_it_looked(tmp_path):
    (tmp_path / "sources.list").write_text("deb https://packages.example/apt cloud-sdk main\n")
    with pytest.raises(ImageUnavailable) as refused:
        debian_mirror("trixie", tmp_path)
    assert str(refused.value) == f"no Debian mirror in {tmp_path}/sources.list or sources.list.d lists trixie"
