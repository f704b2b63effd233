class BaseWeigher:
    minval = None
    maxval = None

    def weight_multiplier(self, host_state):
        return 1.0

    def _weigh_object(self, obj, weight_properties):
        raise NotImplementedError

    def weigh_objects(self, weighed_obj_list, weight_properties):
        weights = []
        for obj in weighed_obj_list:
            weight = self._weigh_object(obj.obj, weight_properties)
            if self.minval is not None:
                weight = max(weight, self.minval)
            if self.maxval is not None:
                weight = min(weight, self.maxval)
            weights.append(weight)
        return weights
