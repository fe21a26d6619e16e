"""Thumbnails of the delivered works on the operator page (issue 26), through the real trigger handler.

A work delivered to a route that sends previews (httpMultipart, the published TelePost config) keeps
its small previews with its stored files; its occurrence page shows an ``<img>`` whose URL is
presigned (5 minutes) for the stored preview object, and the page's CSP ``img-src`` allows that
URL's origin and nothing else. A work kept without a preview (our own webhook route) shows none,
and the CSP then allows no origin at all."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, unquote, urlsplit

from support.cli import T0_ISO
from support.example_routes import SLOT, intents, receiver, start  # noqa: F401  (receiver: the fixture)
from support.ui import get, login

from pixivflow import aws
from pixivflow.adapters.catalog_source import preview_bytes
from pixivflow.domain.assets import artifact_prefix
from pixivflow.http.ui_thumbs import PREVIEW_TTL_S

IMG = re.compile(r'<img src="([^"]+)" alt="([^"]+)"')


def unescape(url: str) -> str:
    return url.replace("&amp;", "&")


def bucket_and_key(url: str) -> tuple[str, str]:
    """A presigned S3 URL names its bucket in the host (virtual-hosted) or the path (path style)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    path = unquote(parts.path.lstrip("/"))
    if ".s3." in host:
        return host.split(".s3.", 1)[0], path
    bucket, _, key = path.partition("/")
    return bucket, key


def img_sources(csp: str) -> list[str]:
    [directive] = [d.strip() for d in csp.split(";") if d.strip().startswith("img-src ")]
    return directive.split()[1:]


def test_a_delivered_work_with_a_stored_preview_shows_a_presigned_thumbnail(make_runtime, receiver):  # noqa: F811
    rt = start(make_runtime, receiver, delivery={"deleteAfterDelivery": False})
    rt.settle()
    work_id = intents(rt)["bot1-submit"].work_id
    page = get(rt, f"/ui/slots/{SLOT}", cookie=login(rt))
    assert page.status == 200
    [(src, alt)] = IMG.findall(page.body)
    assert alt == f"preview of illustration {work_id}"
    url = unescape(src)

    bucket, s3 = rt.env["ARTIFACT_BUCKET"], aws.client("s3")
    prefix = artifact_prefix(SLOT, "cats", work_id)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"])
    previews = [k for k in keys if s3.head_object(Bucket=bucket, Key=k)["Metadata"].get("role") == "preview"]
    assert previews == [f"{prefix}/{work_id}_p{n}.png.preview.jpg" for n in (0, 1)]  # one per page
    assert bucket_and_key(url) == (bucket, previews[0])  # the thumbnail is the first page's preview
    query = parse_qs(urlsplit(url).query)
    assert query["X-Amz-Expires"] == [str(PREVIEW_TTL_S)] and PREVIEW_TTL_S == 300
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"] and query["X-Amz-Signature"][0]
    stored = s3.get_object(Bucket=bucket, Key=previews[0])  # the object the URL names is the stored preview
    assert stored["ContentType"] == "image/jpeg" and stored["Body"].read() == preview_bytes(work_id, 0)

    parts = urlsplit(url)
    assert img_sources(page.headers["content-security-policy"]) == ["data:", f"{parts.scheme}://{parts.netloc}"]
    assert "Delivered works" in page.text()


def test_a_work_without_a_preview_shows_no_thumbnail_and_the_csp_allows_no_origin(make_runtime):
    rt = make_runtime(T0_ISO)  # the demo's own webhook route: the work is stored, no preview is made
    rt.fire("morning-tokyo", iso=T0_ISO)
    rt.settle()
    slot_id = "morning-tokyo@2026-12-01T0800"
    state = rt.wiring.ledger.load(slot_id)
    [cell] = [c for c in state.snapshot_cells() if c.status == "submitted"][:1]
    listed = aws.client("s3").list_objects_v2(Bucket=rt.env["ARTIFACT_BUCKET"],
                                              Prefix=artifact_prefix(slot_id, cell.target_id, cell.work_id) + "/")
    assert listed.get("Contents")  # the work's files are stored, but no preview among them
    page = get(rt, f"/ui/slots/{slot_id}", cookie=login(rt))
    assert page.status == 200 and "<img" not in page.body and "Delivered works" not in page.text()
    assert img_sources(page.headers["content-security-policy"]) == ["data:"]
