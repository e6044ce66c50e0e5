from app.core.text import clean_text, diff_pieces, word_alignment, word_edits, words


def test_words_keep_exact_character_offsets_for_any_script():
    text = "I\u200dlove 👨‍👩‍👧 فلسطين and l33t sp34k, don't!"
    found = words(text)
    assert [text[w.start:w.end] for w in found] == [w.text for w in found]
    texts = [w.text for w in found]
    assert "👨‍👩‍👧" in texts  # a family emoji with its zero-width joiners is one word
    assert "فلسطين" in texts and "l33t" in texts and "sp34k" in texts and "don't" in texts


def test_clean_text_normalises_without_changing_meaning():
    assert clean_text("cafe\u0301\r\nok") == "café\nok"


def test_word_edits_are_minimal_and_grouped():
    ops, distance = word_edits("People from that village are all lazy parasites",
                               "People from that village are all hard workers")
    assert distance == 2
    assert [(o.op, o.old, o.new) for o in ops] == [("replace", "lazy parasites", "hard workers")]

    ops, distance = word_edits("I love you", "I really love you so much")
    assert distance == 3
    assert [(o.op, o.new) for o in ops] == [("insert", "really"), ("insert", "so much")]

    ops, distance = word_edits("not at all bad", "bad")
    assert distance == 3 and [(o.op, o.old) for o in ops] == [("delete", "not at all")]
    assert word_edits("same text", "same text") == ([], 0)


def test_diff_pieces_rebuild_the_edit_in_reading_order():
    pieces = diff_pieces("I do not like it 😀", "I like it a lot 😀")
    assert "".join(p["text"] for p in pieces if p["kind"] != "delete").replace("  ", " ") == "I like it a lot 😀"
    assert [p["text"] for p in pieces if p["kind"] == "delete"] == ["do not"]
    assert [p["text"] for p in pieces if p["kind"] == "insert"] == ["a lot"]
    assert diff_pieces("same", "same") == [{"kind": "equal", "text": "same"}]


def test_word_alignment_pairs_words_through_the_edit():
    before = [("Women", 0.3), ("can't", 0.9), ("lead", 0.1)]
    after = [("Women", 0.5), ("can", 0.1), ("lead", 0.0)]
    assert word_alignment(before, after) == [("Women", 0.3, 0.5), ("can't", 0.9, None), ("can", None, 0.1),
                                             ("lead", 0.1, 0.0)]


def test_one_segmentation_for_edit_distance_and_heatmaps():
    """The edit distance counts the words the heatmap shows (local_models.words): obfuscated
    words, emoji with joiners, zero-width characters and right-to-left words each count once."""
    from local_models.words import split_words

    text = "ur sh!t f*ck n1gga 👨\u200d👩\u200d👧 n\u200bice مرحبا، don't"
    assert words(text) == split_words(text)
    assert [w.text for w in words(text)] == ["ur", "sh!t", "f*ck", "n1gga", "👨\u200d👩\u200d👧", "n\u200bice", "مرحبا",
                                             "،", "don't"]
    ops, distance = word_edits("that is sh!t", "that is f*cking sh!t")
    assert distance == 1 and [(o.op, o.new) for o in ops] == [("insert", "f*cking")]
    assert word_edits("you n1gga", "you n!gga")[1] == 1


def test_pairing_a_common_tail_first_gives_the_full_matrixs_steps():
    """Three words in random lists of up to eight: ties everywhere, and the same steps as the full
    matrix's trace in every case (the assistant compares 64 one-word edits of a text)."""
    import random

    from app.core.text import _alignment

    rng = random.Random(7)
    for _ in range(20000):
        a = [rng.choice("xyz") for _ in range(rng.randint(0, 8))]
        b = [rng.choice("xyz") for _ in range(rng.randint(0, 8))]
        assert _alignment(a, b) == _alignment(a, b, pair_tail=False), (a, b)
    text = "you are all such stupid idiots and i hate you"
    assert word_edits(text, text.replace("stupid", "stup1d"))[0][0].old == "stupid"
