"""Load Diffuser's own code (github asFeng/Diffuser) for the agreement checks and the bench.

Diffuser is not a package: its modules import each other as ``models.*`` from the repository root,
and ``graphtrainer.py`` / ``models/diffuser_utils.py`` import HuggingFace ``transformers`` for
classes the pieces we run never touch (``Trainer`` as a base class, ``RobertaConfig``). Those
imports are satisfied by empty stand-ins so that the code we measure and compare against —
``graphTrainer._create_adj_mat`` / ``_from_adj_to_batched_graphs`` (NumPy + DGL) and
``DiffuserSelfAttention.forward`` (torch + DGL) — runs unmodified, from Diffuser's own files.

The checkout is found at ``$DIFFUSER_SRC`` or ``/work/peers/diffuser/Diffuser`` (what
``scripts/peer_env_diffuser.sh`` exports there).
"""

from __future__ import annotations

import os
import sys
import types

__all__ = ["diffuser_root", "load"]

DEFAULT_ROOT = "/work/peers/diffuser/Diffuser"


def diffuser_root() -> str | None:
    for root in (os.environ.get("DIFFUSER_SRC"), DEFAULT_ROOT):
        if root and os.path.exists(os.path.join(root, "models", "diffuser_att.py")):
            return root
    return None


def _stub_transformers() -> None:
    if "transformers" in sys.modules:
        return

    class _Anything:
        def __init__(self, *args, **kwargs):
            pass

    names = {
        "transformers": ["Trainer", "TrainingArguments", "DataCollatorWithPadding", "RobertaTokenizer"],
        "transformers.modeling_utils": ["PreTrainedModel", "apply_chunking_to_forward", "ModelOutput"],
        "transformers.models": [],
        "transformers.models.roberta": [],
        "transformers.models.roberta.configuration_roberta": ["RobertaConfig"],
        "transformers.activations": ["ACT2FN"],
        "transformers.tokenization_utils_base": ["PreTrainedTokenizerBase"],
        "transformers.trainer_utils": ["EvalPrediction"],
        "transformers.trainer_callback": ["TrainerCallback"],
        "transformers.training_args": ["TrainingArguments"],
        "transformers.data": [],
        "transformers.data.data_collator": ["DataCollator"],
    }
    for module_name, attributes in names.items():
        module = types.ModuleType(module_name)
        for attribute in attributes:
            setattr(module, attribute, type(attribute, (_Anything,), {}))
        module.ACT2FN = {}
        sys.modules[module_name] = module


def load():
    """``(graphtrainer module, models.diffuser_att module)`` from Diffuser's checkout, or raise
    ``ImportError`` saying what is missing (DGL, or the checkout)."""
    root = diffuser_root()
    if root is None:
        raise ImportError("Diffuser's source was not found: set DIFFUSER_SRC to a checkout of asFeng/Diffuser")
    os.environ.setdefault("DGLBACKEND", "pytorch")
    import dgl  # noqa: F401 - a clear ImportError when DGL is missing

    _stub_transformers()
    if root not in sys.path:
        sys.path.insert(0, root)
    import graphtrainer
    from models import diffuser_att

    return graphtrainer, diffuser_att
