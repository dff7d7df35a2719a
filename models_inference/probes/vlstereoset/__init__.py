"""The VLStereoSet probe family (seed 001: Zhou, Lai and Jiang, *VLStereoSet*, AACL 2022;
docs/families/vlstereoset.md): does a model pick the stereotypical caption for an anti-stereotypical image?

Modules: :mod:`.dataset` (the released CSV, validated; images from a folder or URLs),
:mod:`.neutralise` (S'_s / S'_a for lmss and vlss), :mod:`.loglik` (log-likelihood of given
text under local transformers models), :mod:`.scorers` (CLIP, loglik, mcq, the text-only
analogue, the reference models IDM / BIM / RAM), :mod:`.probe` (the resumable landing loop).
The metrics (vlrs, vlbs, ivlas, lmss, vlss) are SQL: ``dbt_project/models/vlstereoset/``.
"""
