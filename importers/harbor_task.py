"""A Harbor task folder on disk as the archive the upload endpoint takes (`flask import-harbor-task DIR`).

The folder is archived as it is (links as links, so domain.harbor_task refuses one leading outside, as it does for
an upload); the archive holds the folder by its name, which names the version's task.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from domain.harbor_task import MAX_TASK_UPLOAD_BYTES, TaskRefused


def folder_archive(folder: Path) -> bytes:
    """`folder` as a gzip-compressed tar of the folder itself, or TaskRefused when it is larger than an upload."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(folder, arcname=folder.resolve().name, recursive=True)
        if out.tell() > MAX_TASK_UPLOAD_BYTES:
            raise TaskRefused("", f"{folder} is over {MAX_TASK_UPLOAD_BYTES // (1024 * 1024)} MB compressed")
    return out.getvalue()
