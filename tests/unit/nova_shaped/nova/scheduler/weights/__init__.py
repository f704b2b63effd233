from nova import weights


class BaseHostWeigher(weights.BaseWeigher):
    pass
