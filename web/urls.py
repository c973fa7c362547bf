"""URLs the app hands out: same-origin redirect targets and external URLs that no Host header can steer."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from flask import Flask, current_app, url_for

from queries.export_formats import DEFAULT_FORMAT
from queries.export_formats import variants as export_variants
from queries.exports import EXPORT_KINDS, export_filename
from queries.filters import TrialFilters

# C0 controls, space and DEL: browsers drop TAB/CR/LF anywhere and strip the rest at the ends before parsing.
_CONTROL_OR_SPACE = re.compile(r"[\x00-\x20\x7f]")


def same_origin_path(target: str | None) -> str | None:
    """Return `target` when a browser would read it as a path on this site, else None.

    Refused: a scheme or host, a backslash (browsers read it as a slash), a
    control character or space (TAB, CR and LF are dropped by the browser, so
    `/\\t/evil` becomes `//evil`), and anything not starting with one `/`, as
    written or once percent-decoded.
    """
    if not target:
        return None
    for form in (target, unquote(target)):  # percent-encoded too, for anything that decodes it once more
        if _CONTROL_OR_SPACE.search(form) or "\\" in form or not form.startswith("/") or form.startswith("//"):
            return None
        parts = urlsplit(form)
        if parts.scheme or parts.netloc:
            return None
    return target


def safe_redirect_target(target: str | None, endpoint: str = "environments.index") -> str:
    """`target` when it is a same-origin path, else the URL of `endpoint` (no open redirects)."""
    return same_origin_path(target) or url_for(endpoint)


def external_url(endpoint: str, **values) -> str:
    """An absolute URL for `endpoint`: under AGENTFORGE_BASE_URL when set, else the (trusted) request host."""
    base = current_app.config.get("AGENTFORGE_BASE_URL")
    if base:
        return base.rstrip("/") + url_for(endpoint, **values)
    return url_for(endpoint, _external=True, **values)


@dataclass(frozen=True)
class ExportVariant:
    """One kind of rollout export in another format: `format=` and its URL and file name."""

    format: str
    url: str
    filename: str


@dataclass(frozen=True)
class ExportLink:
    """One kind of rollout export for a filter: its URL and file name, and its ATIF and TRL variants."""

    kind: str
    url: str
    filename: str
    variants: tuple[ExportVariant, ...]


# The rewards each band holds: (lowest, highest, lowest excluded, highest excluded).
BAND_REWARDS = {
    "failed": (0.0, 1.0, False, True),
    "recovery": (0.0, 1.0, True, True),
    "successful": (1.0, 1.0, False, False),
}


def possible_kinds(filters: TrialFilters) -> tuple[str, ...]:
    """The export kinds the filters' reward constraints (rewardBand, minReward, maxReward) can hold rollouts of, in
    EXPORT_KINDS order: successful needs a reward of 1, failed one below 1, recovery one strictly between 0 and 1,
    preference two different rewards; unscored trials have no rollout at all."""
    if filters.reward_band == "unscored":
        return ()
    low, high, low_out, high_out = BAND_REWARDS.get(filters.reward_band or "", (0.0, 1.0, False, False))
    if filters.min_reward is not None and filters.min_reward > low:  # "reward at least": an included bound
        low, low_out = filters.min_reward, False
    if filters.max_reward is not None and filters.max_reward < high:  # "reward at most"
        high, high_out = filters.max_reward, False
    if low > high or (low == high and (low_out or high_out)):
        return ()
    possible = {
        "all": True,
        "successful": high == 1.0 and not high_out,
        "failed": low < 1.0,
        "recovery": low < 1.0 and high > 0.0 and (low < high or 0.0 < low < 1.0),
        "preference": low < high,
    }
    return tuple(kind for kind in EXPORT_KINDS if possible[kind])


def export_links(
    filters: dict[str, str], kinds: tuple[str, ...] = EXPORT_KINDS, *, include_excluded: bool = False
) -> list[ExportLink]:
    """Each of `kinds`' GET /api/v1/rollouts URL (and its variants in the other formats: ATIF, TRL) narrowed by the
    filter parameters, with `includeExcluded=true` when the trials a reviewer excluded are asked for too."""
    base = external_url("api.export_rollouts")
    extra = {"includeExcluded": "true"} if include_excluded else {}
    links = []
    for kind in kinds:
        url = f"{base}?{urlencode({'kind': kind, **filters, **extra})}"
        variants = tuple(
            ExportVariant(variant, f"{url}&format={variant}", export_filename(kind, variant))
            for variant in export_variants()
        )
        links.append(ExportLink(kind, url, export_filename(kind, DEFAULT_FORMAT), variants))
    return links


def trusted_hosts(base_url: str | None, configured: str | None) -> list[str]:
    """Flask's TRUSTED_HOSTS: the comma-separated list configured, else local names; plus the base URL's host."""
    if configured:
        hosts = [host.strip() for host in configured.split(",") if host.strip()]
    else:
        hosts = ["localhost", "127.0.0.1", "[::1]"]
    if base_url and (base_host := urlsplit(base_url).hostname) and base_host not in hosts:
        hosts.append(base_host)
    return hosts


def external_url_helpers(app: Flask) -> None:
    """Make external_url available to templates."""
    app.jinja_env.globals["external_url"] = external_url


# A stand-in id no row has: the first place it takes in a URL is its path's (a query string comes after the path).
_STAND_IN = str(uuid.uuid4())


@dataclass(frozen=True)
class IdLink:
    """The URL of one endpoint for any id: url_for once with a stand-in id, then each row's id in its place.

    A page of 50 trials with their snippets hands out some 200 links; url_for
    builds each in about 20 µs, this in well under one (and gives the same text).
    """

    head: str
    tail: str

    @classmethod
    def of(cls, endpoint: str, id_name: str, **values: object) -> IdLink:
        """The link of `endpoint` whose `id_name` argument varies (the other `values` fixed, e.g. a trail of query
        arguments)."""
        arguments: dict[str, Any] = {**values, id_name: _STAND_IN}
        head, _, tail = url_for(endpoint, **arguments).partition(_STAND_IN)
        return cls(head, tail)

    def __call__(self, row_id: object, anchor: str | None = None) -> str:
        """The URL for `row_id`, with `anchor` (an element id of ours, such as step-3: nothing to quote)."""
        return f"{self.head}{row_id}{self.tail}" + (f"#{anchor}" if anchor else "")
