"""Zoo names, lookup, info and building."""

from __future__ import annotations

import pytest
import torch

from stratagem.frontend import zoo

EXPECTED = {
    "lenet", "alexnet", "vgg16", "resnet-101", "inception-v3", "rnntc", "rnnlm", "rnnlm-2", "nmt",
    "wideresnet", "transformer", "transformer-s", "rnn", "bert-base",
    *(f"wresnet-{d}-{w}" for d in (50, 101, 152) for w in (4, 6, 8, 10)),
    *(f"rnn-{layers}-{h}k" for layers in (6, 8, 10) for h in (4, 6, 8)),
    *(f"gpt-{s}" for s in ("tiny", "125m", "1.3b", "7b", "13b", "70b")),
    "mlp", "resnet-tiny", "transformer-mini", "unet",
    "hf:gpt2", "hf:bert-base-uncased", "hf:llama", "hf:llama-7b", "hf:t5-small",
}


def test_the_zoo_has_exactly_the_named_models():
    assert set(zoo.names()) == EXPECTED and len(zoo.names()) == len(EXPECTED)


def test_no_model_is_named_as_another_models_tiny_variant():
    assert not {name + zoo.TINY for name in zoo.names()} & set(zoo.names())


def test_tiny_names_resolve_to_the_tiny_variant():
    entry, tiny = zoo.resolve("gpt-70b-tiny")
    assert entry.name == "gpt-70b" and tiny
    assert zoo.info("gpt-70b-tiny").batch_size == 2 and zoo.info("gpt-70b-tiny").published is None
    assert zoo.info("gpt-70b").published.parameters == 68_976_648_192


def test_an_unknown_name_lists_close_names_and_the_command():
    with pytest.raises(zoo.UnknownModelError) as error:
        zoo.resolve("resnet101")
    assert "resnet-101" in str(error.value) and "stratagem models" in str(error.value)


def test_papers_settings_are_the_default_batch_sizes():
    assert zoo.info("alexnet").batch_size == 256
    assert {zoo.info(n).batch_size for n in ("inception-v3", "resnet-101", "rnntc", "rnnlm", "nmt")} == {64}
    assert zoo.info("wresnet-101-8").batch_size == 128 and zoo.info("rnn-8-8k").batch_size == 512
    assert zoo.info("transformer").batch_size == 256


def test_modules_build_on_meta_by_default_and_for_real_on_cpu():
    model, inputs = zoo.module("gpt-70b")
    assert all(p.device.type == "meta" for p in model.parameters())
    assert inputs[0].shape == (8, 4096) and inputs[0].device.type == "meta"
    tiny, tiny_inputs = zoo.module("gpt-70b-tiny", "cpu")
    assert torch.isfinite(tiny(*tiny_inputs))


def test_the_batch_size_can_be_changed():
    _, inputs = zoo.module("resnet-101", batch_size=3)
    assert inputs[0].shape == (3, 3, 224, 224) and inputs[1].shape == (3,)


def test_same_seed_same_model_and_inputs():
    (a, xa), (b, xb) = zoo.module("rnnlm-tiny", "cpu", seed=3), zoo.module("rnnlm-tiny", "cpu", seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert all(torch.equal(x, y) for x, y in zip(xa, xb))


def test_rnns_run_one_lstm_cell_per_layer_per_step():
    from stratagem.frontend.export import export_program
    for name, cells in (("rnnlm", 2 * 40), ("rnntc", 4 * 40), ("nmt", 2 * 40 * 2), ("rnn-6-4k", 6 * 20)):
        program = export_program(*zoo.module(name))
        assert sum(str(n.target) == "stratagem.gated_lstm_cell.default" for n in program.graph.nodes) == cells, name


def test_the_70b_decoder_uses_grouped_query_attention():
    model, _ = zoo.module("gpt-70b")
    attention = model.layers[0].attention
    assert attention.wq.weight.shape == (8192, 8192) and attention.wk.weight.shape == (1024, 8192)


def test_hugging_face_models_run_eagerly_on_meta():
    pytest.importorskip("transformers")
    model, inputs = zoo.module("hf:gpt2-tiny")
    loss = model(*inputs)
    assert loss.device.type == "meta" and loss.shape == ()


def test_every_model_is_in_the_zoo_document():
    from pathlib import Path
    text = (Path(__file__).parents[3] / "docs" / "zoo.md").read_text()
    assert all(f"| `{name}` |" in text for name in zoo.names())
