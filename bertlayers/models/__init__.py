"""Models: encoders with heads, for pretraining and tasks."""

from bertlayers.models.pretrainer import BertPretrainer, CausalLMPretrainer

__all__ = ["BertPretrainer", "CausalLMPretrainer"]
