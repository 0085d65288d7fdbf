"""Types shared by every section of the fleet file."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]

Modality = Literal["text", "image", "audio"]
CacheType = Literal[
    "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1",
    # vLLM / SGLang KV cache dtypes (llama.cpp has no fp8 cache).
    "fp8", "fp8_e4m3", "fp8_e5m2",
]  # fmt: skip
# llama.cpp's --spec-type names (common/speculative.cpp, b11434).
SpecType = Literal[
    "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
]  # fmt: skip
EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
