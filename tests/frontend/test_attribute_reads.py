"""Reads of watched plain attributes are recorded while a recording is open, nested recordings
see the same reads, and each class is put back as it was."""

from __future__ import annotations

from stratagem.frontend.attribute_reads import recording


class Layer:
    kind = "default"               # a class value an instance may shadow

    def __init__(self, index: int):
        self.index = index


class Deeper(Layer):
    @property
    def width(self) -> int:
        return 2 * self.index


def test_reads_are_recorded_while_open_and_classes_put_back():
    a, b = Layer(0), Deeper(1)
    with recording([(Layer, "index"), (Layer, "kind")]) as recorder:
        assert a.index == 0                            # not recorded: no Reads open
        with recorder.reading() as outer:
            assert (a.index, b.index, b.kind) == (0, 1, "default")
            with recorder.reading() as inner:
                b.index = 5
                assert b.index == 5
            recorder.told([(a, "index", 7)])
        assert [(m, n, v) for m, n, v in outer.seen] == [(a, "index", 0), (b, "index", 1), (b, "kind", "default"),
                                                         (b, "index", 5), (a, "index", 7)]
        assert inner.seen == [(b, "index", 5)]
        assert vars(b)["index"] == 5 and Layer.kind == "default"
    assert "index" not in vars(Layer) and vars(Layer)["kind"] == "default" and "kind" not in vars(Deeper)
    assert (a.index, b.index, Deeper.kind) == (0, 5, "default")


def test_a_missing_attribute_still_raises_attribute_error():
    layer = Layer(0)
    del layer.index
    with recording([(Layer, "index")]) as recorder, recorder.reading():
        try:
            layer.index
        except AttributeError as error:
            assert "index" in str(error)
        else:
            raise AssertionError("no AttributeError")


def test_what_the_class_holds_is_given_as_the_class_gives_it():
    shadowed, plain = Deeper(3), Deeper(4)
    shadowed.__dict__["width"] = 10       # an instance value a data descriptor on the class would hide
    with recording([(Deeper, "width")]) as recorder, recorder.reading() as reads:
        assert (shadowed.width, plain.width, Deeper.width.fget(plain)) == (10, 8, 8)
    assert [(m, v) for m, _, v in reads.seen] == [(shadowed, 10), (plain, 8)]
    assert isinstance(vars(Deeper)["width"], property) and plain.width == 8
