"""BiasDora's reference-data loaders (docs/method.md#1-descriptors): descriptors normalised,
extracted from CrowS-Pairs and loaded (:mod:`.descriptors`), the paper's T2T / T2I lists and the
T2T setting prefixes (:mod:`.templates`), the I2T descriptions tokenised into words
(:mod:`.description_words`). The files they read are in ``ingestion/data/biasdora/``."""
