"""Stock Hugging Face models, built from a small config with every other setting at its default
(use_cache True for decoders, return_dict True), capture as users build them: the KV cache is
turned off for the training graph (and back on after, and said), inputs may be given by name, and
the captured loss is the model's own (float64, within the graph's rounding bound)."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from stratagem.frontend import capture
from stratagem.frontend.capture import CaptureNote
from stratagem.frontend.interpret import interpret
from stratagem.tdl.rounding import same_math_rtol

pytestmark = pytest.mark.numerics
transformers = pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SMALL = dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)
FAMILIES = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", dict(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "llama": ("LlamaForCausalLM", "LlamaConfig", dict(SMALL, num_key_value_heads=2)),
    "mistral": ("MistralForCausalLM", "MistralConfig", dict(SMALL, num_key_value_heads=2)),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", dict(SMALL, num_key_value_heads=2)),
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", SMALL),
    "opt": ("OPTForCausalLM", "OPTConfig", dict(vocab_size=100, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                                               num_attention_heads=4, max_position_embeddings=64,
                                               word_embed_proj_dim=32)),
    "phi": ("PhiForCausalLM", "PhiConfig", SMALL),
    "gemma": ("GemmaForCausalLM", "GemmaConfig", dict(SMALL, num_key_value_heads=2, head_dim=8)),
    "bert": ("BertForMaskedLM", "BertConfig", SMALL),
    "t5": ("T5ForConditionalGeneration", "T5Config", dict(vocab_size=100, d_model=32, d_kv=8, d_ff=64,
                                                           num_layers=2, num_heads=4, decoder_start_token_id=0,
                                                           pad_token_id=0)),
}


def _model(family: str):
    model_class, config_class, config = FAMILIES[family]
    torch.manual_seed(0)
    return getattr(transformers, model_class)(getattr(transformers, config_class)(**config)).double().eval()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_stock_model_captures_with_its_defaults_and_computes_its_own_loss(family):
    model = _model(family)
    cached = getattr(model.config, "use_cache", False)
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = capture(model, {"input_ids": ids, "labels": ids})
    assert getattr(model.config, "use_cache", False) == cached          # restored
    assert bool(graph.meta["cache_turned_off"]) == cached
    assert any(issubclass(w.category, CaptureNote) for w in caught) == cached
    expected = model(input_ids=ids, labels=ids).loss.detach()
    loss = interpret(graph, model, [ids, ids])[0]
    assert loss.shape == () and graph.outputs[0] != graph.outputs[-1] or len(graph.outputs) == 1
    torch.testing.assert_close(loss, expected, rtol=same_math_rtol(graph), atol=0)


def test_inputs_by_name_bind_to_the_forward_signature():
    model = _model("llama")
    ids = torch.randint(0, 100, (2, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_name = capture(model, {"input_ids": ids})
        by_position = capture(model, (ids,))
    assert [op.kind for op in by_name.ops] == [op.kind for op in by_position.ops]
    with pytest.raises(Exception, match="do not fit the module's forward"):
        capture(model, {"input_idz": ids})
