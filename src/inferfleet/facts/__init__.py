"""Facts recorded in the fleet repository (``facts/`` next to the fleet file).

Model header facts live with the model sources (:mod:`inferfleet.hub.headers`);
this package holds what hosts measured: each service's llama-server boots
(:mod:`.boots`), used by ``budget`` and the fit rules in place of the estimate.
"""
