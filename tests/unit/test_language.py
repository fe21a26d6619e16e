"""The novel language rule (pixivflow-real-configs note §3) on a table of texts.

Each row's expected code is what PixivFlow's detector answers: franc-min's script classes
(checked against franc-min 6.2.0 in the note: pure Chinese -> cmn, the same text plus one kana
-> jpn) corrected by refineFrancCode's kana/Han shares."""

import pytest

from pixivflow.domain.language import detect, franc_code, verdict

ZH = ("这是一个关于猫和大海的故事。小猫每天早上都会坐在窗边看着远处的海浪，它梦想有一天能够航行到世界的尽头。"
      "后来它遇见了一位老渔夫，老渔夫答应带它出海，于是它们一起度过了一个难忘的夏天。")
JA = ("猫は毎朝窓辺に座って、遠くの海の波を眺めていました。いつか世界の果てまで航海できる日を夢見ていたのです。"
      "ある日、年老いた漁師に出会い、一緒に海へ出ることになりました。")
KO = "고양이는 매일 아침 창가에 앉아 먼 바다의 파도를 바라보았습니다. 언젠가 세상의 끝까지 항해할 수 있기를 꿈꾸었습니다."
EN = "The cat sat by the window every morning, watching the distant waves and dreaming of sailing to the end of the world."
RUBY = ("[[rb:猫 > ねこ]]和[[rb:大海 > おおうみ]]的[[rb:故事 > ものがたり]]。[newpage]小猫每天早上都会坐在[[rb:窗边 > まどべ]]"
        "看着远处的[[rb:海浪 > うみなみ]]，它梦想有一天能够航行到世界的尽头。[pixivimage:12345]")
PREFACE_JA = "まえがき：この作品は中国語で書かれています。読んでくださってありがとうございます。よろしくお願いします。\n"

ROWS = [
    # (case, title, body, expected code or None, chinese filter keeps?, non-chinese keeps?)
    ("pure Chinese", "猫与海", ZH, "cmn", True, False),
    ("Chinese with one kana", "猫与海", ZH.replace("。", "の。", 1), "cmn", True, False),
    ("Japanese", "猫と海", JA, "jpn", False, True),
    ("Korean", "고양이", KO, "kor", False, True),
    ("English", "The sea cat", EN, "eng", False, True),
    ("ruby markup pushes kana past 10%", "猫与海", RUBY, "jpn", False, True),
    ("a Japanese preface before Chinese", "猫与海", PREFACE_JA + ZH, "jpn", False, True),
    ("a short Japanese preface before a long Chinese text", "猫与海", "まえがき。\n" + ZH * 3, "cmn", True, False),
    ("header lines are not text", "Title: x", "Author: someone\nTags: a,b\n---\n" + ZH, "cmn", True, False),
]


@pytest.mark.parametrize("case,title,body,code,keeps_zh,keeps_other", ROWS, ids=[r[0] for r in ROWS])
def test_language_table(case, title, body, code, keeps_zh, keeps_other):
    found = detect(title, body)
    assert found is not None and found.code == code, case
    assert verdict("1", title, body, "chinese").keep is keeps_zh
    assert verdict("1", title, body, "non-chinese").keep is keeps_other


def test_one_kana_is_japanese_to_franc_before_the_correction():
    # franc's Japanese class counts kana plus Han: one kana tips a Chinese text over.
    assert franc_code("猫与海\n" + ZH) == "cmn"
    assert franc_code("猫与海\n" + ZH.replace("。", "の。", 1)) == "jpn"


def test_short_text_is_inconclusive_and_rejects_only_when_strict():
    assert detect("猫", "短篇。") is None
    assert verdict("7", "猫", "短篇。", "chinese").keep is True
    strict = verdict("7", "猫", "短篇。", "chinese", strict=True)
    assert strict.keep is False and strict.reason == "Novel 7 skipped: language filter inconclusive (required: chinese)"


def test_mismatch_names_what_was_detected():
    v = verdict("42", "猫と海", JA, "chinese")
    assert v.keep is False
    assert v.reason == "Novel 42 skipped: language filter mismatch (detected: Japanese, required: chinese)"
    assert verdict("42", "猫与海", ZH, "chinese").detected.label == "Chinese (Mandarin) (cmn)"


def test_detect_language_off_is_inconclusive():
    assert verdict("1", "猫と海", JA, "chinese", detect_language=False).keep is True
    assert verdict("1", "猫与海", ZH, "chinese", detect_language=False, strict=True).keep is False


def test_franc_reads_only_the_first_2048_units():
    # Japanese first (kana-heavy, 2048+ units), Chinese after: franc sees Japanese only.
    text = JA * 30 + ZH * 30
    assert franc_code(text) == "jpn"
