from nova import filters


class BaseHostFilter(filters.BaseFilter):
    RUN_ON_REBUILD = False

    def host_passes(self, host_state, filter_properties):
        raise NotImplementedError
