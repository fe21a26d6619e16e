"""The published Workflow Protocol v1 files the suite tests against (tests/contract/README.md) are the
copies they say they are: each pinned by its sha256, so a file edited by hand, or a new version
copied in without adapting the code in the same commit, fails here first."""

from __future__ import annotations

import hashlib
from pathlib import Path

CONTRACT = Path(__file__).resolve().parents[1] / "contract"
COPIES = {
    "protocol.schema.json": "a441550f3e39135de0c13dedd1b55d4865d6fce5dfa25b4fe2c83c321661e012",
    "error-mapping.json": "05b2472587a97e0cd66e14c548fad53eb57122b417e89f5424fa63eacae8bfa2",
    "fixtures/ackresult.candidate_search.json": "67f6b45948bf1c7fc2244354c82a53cb52aaba05b06ccb706ca66517e231bd64",
    "fixtures/capabilities.pixivflow.json": "407087bb45c55c5a62d143622116b74cd9bc8c6af72db6d2f04955d44f11f569",
    "fixtures/event.job.expired.json": "8d8ace75ed1ad7b12f498e89e76552e4382241a2523ed9fb0b00cdc696021140",
    "fixtures/event.job.succeeded.json": "c0eef296d5e4b5f27411ca647746df136fa9cc0bf9d7940fc4ec1bde990a10b6",
    "fixtures/eventpage.candidate_search.json": "57a16799cc438f7246a13962523a9995546b97e9c188585c91a001d01712f154",
    "fixtures/job.cancelled.candidate_search.json": "5385c4de5058b1f0285ebd7bb40d34c2ee25b6a89b13bcc31a0c5422ce3d5d6f",
    "fixtures/job.failed.no_candidate.json": "1735f8831266ed0d8fa672561447f7fee8707a696d4a3615e84d97d6b9c33833",
    "fixtures/job.queued.json": "b48ae14c5d30b8d20298b429a23c9e87dd90350eedd7dc27200da6098f7ab18b",
    "fixtures/job.running.json": "91e34c855b7957479bb9342e35628e1fa1a9a40ed531a25d96e93b02e1cb0b72",
    "fixtures/job.succeeded.candidate_search.json": "c8221deaec05d69bc4d77022d981736c5799be5f854f6a742bc2d8f0770ee221",
    "fixtures/jobpage.candidate_search.json": "8f8d6deb41e46dd643815c0103ae95cdc5092076c7af054969d07afec31af33e",
    "fixtures/task.candidate_search.json": "71ef7ef2acbcf8569e1d96c1e788fb7f07bbbac9dc30518de1d07e6fd0cfdf52",
    "fixtures/task.candidate_search.target_only.json": "5889b8e2a8ef9cdfbb3d719414515f1e259b4601967d37482fd178b65b8425ad",
}


def test_every_protocol_copy_is_byte_for_byte_the_one_pinned():
    on_disk = {str(p.relative_to(CONTRACT)) for p in [CONTRACT / "protocol.schema.json", CONTRACT / "error-mapping.json",
                                                       *(CONTRACT / "fixtures").glob("*.json")]}
    assert on_disk == set(COPIES)
    changed = {name for name, digest in COPIES.items()
               if hashlib.sha256((CONTRACT / name).read_bytes()).hexdigest() != digest}
    assert not changed, f"changed since they were copied: {sorted(changed)}"


def test_the_package_carries_the_same_schema():
    package = CONTRACT.parents[1] / "shared" / "pixivflow" / "http" / "protocol_v1.schema.json"
    assert package.read_bytes() == (CONTRACT / "protocol.schema.json").read_bytes()
