"""A Harbor task folder on disk as the archive the upload endpoint takes (`flask import-harbor-task DIR`), and a
folder of them as the archive the dataset upload takes (`flask import-harbor-dataset DIR`).

The folder is archived as it is (links as links, so domain.harbor_task refuses one leading outside, as it does for
an upload); the archive holds the folder by its name, which names the version's task (or, for a dataset, holds the
task folders).
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from domain.harbor_task import MAX_TASK_UPLOAD_BYTES, TaskRefused


def folder_archive(folder: Path, limit: int = MAX_TASK_UPLOAD_BYTES) -> bytes:
    """`folder` as a gzip-compressed tar of the folder itself, or TaskRefused once it is larger than an upload may
    be (`limit`: a task's by default)."""
    out = io.BytesIO()
    over = TaskRefused("", f"{folder} is over {limit // (1024 * 1024)} MB compressed")

    def within(info: tarfile.TarInfo) -> tarfile.TarInfo:
        if out.tell() > limit:  # checked as each entry is added, not once the whole folder is compressed
            raise over
        return info

    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(folder, arcname=folder.resolve().name, recursive=True, filter=within)
    if out.tell() > limit:
        raise over
    return out.getvalue()
