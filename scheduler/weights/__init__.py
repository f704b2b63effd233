"""Host weighers. ``weights.BaseHostWeigher`` mirrors Nova's ``nova.scheduler.weights``."""
from scheduler.weights.base import BaseHostWeigher, get_weight_multiplier

__all__ = ['BaseHostWeigher', 'get_weight_multiplier']
