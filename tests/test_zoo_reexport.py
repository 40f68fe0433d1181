"""`stratagem.zoo` re-exports the zoo without importing torch until it is used."""

from __future__ import annotations

import subprocess
import sys

import stratagem.zoo


def test_importing_the_zoo_does_not_import_torch():
    code = "import sys, stratagem.zoo; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_it_forwards_to_the_front_end():
    from stratagem.frontend import zoo
    assert stratagem.zoo.names() == zoo.names()
    assert stratagem.zoo.info("vgg16") == zoo.info("vgg16")
    model, inputs = stratagem.zoo.module("lenet-tiny", "cpu")
    assert model(*inputs).shape == ()
