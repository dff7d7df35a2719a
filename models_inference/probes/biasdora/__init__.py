"""The BiasDora probes (*BiasDora: Exploring Hidden Biased Associations in Vision-Language Models*).

``prompts`` (every prompt of the paper, verbatim, and its generation constants), ``parsing``
(T2T answers), ``t2t`` (word completion), ``t2i`` (images per descriptor), ``i2t``
(descriptions of those images), ``scoring`` (sentiment and toxicity of association
sentences), ``judge`` and ``ratings`` (the LLM judge of associations and its answer parser).
"""
