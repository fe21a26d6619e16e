"""A topic selection resumes only its own checkpoint (services/topic.py): one written for another
topic, type or base day (a config change, a later occurrence) is ignored, not continued."""

from types import SimpleNamespace

from pixivflow.config import TargetConfig
from pixivflow.domain.topic import DayProgress, checkpoint_fingerprint
from pixivflow.services.topic import TopicRun

NOW = 1_796_090_400_000  # 2026-12-01T02:00:00Z = 11:00 JST: the topic day is 2026-11-30
TARGET = TargetConfig(id="t", type="illustration", mode="topic", topic="ミク", date="YESTERDAY", limit=1,
                      noMatchPolicy={"lookbackDays": 3})


def topic_run(checkpoint):
    ctx = SimpleNamespace(now=lambda: NOW)
    slot = SimpleNamespace(occurrence_at=NOW, created_at=NOW, slot_id="s")
    run = SimpleNamespace(ctx=ctx, target=TARGET, slot=slot, cell=SimpleNamespace(selection_checkpoint=checkpoint))
    return TopicRun(run, select_fn=None)


def doc(fp):
    return {"fp": fp, "dayIndex": 2, "progress": DayProgress("2026-11-28", next_tag=3).to_doc(), "done": {"checked": ["x"]}}


def test_its_own_checkpoint_resumes_at_its_day_and_tag():
    tr = topic_run(doc(checkpoint_fingerprint("illustration", "ミク", "2026-11-30")))
    assert tr.days == ["2026-11-30", "2026-11-29", "2026-11-28", "2026-11-27"]
    index, progress, done = tr._restore()
    assert (index, progress.day, progress.next_tag, done) == (2, "2026-11-28", 3, {"checked": ["x"]})


def test_a_checkpoint_of_another_day_or_topic_is_ignored():
    for fp in (checkpoint_fingerprint("illustration", "ミク", "2026-11-29"),
               checkpoint_fingerprint("novel", "ミク", "2026-11-30"),
               checkpoint_fingerprint("illustration", "アークナイツ", "2026-11-30")):
        assert topic_run(doc(fp))._restore() == (0, None, {})
    assert topic_run(None)._restore() == (0, None, {})
