class BaseFilter:
    run_filter_once_per_request = False

    def run_filter_for_index(self, index):
        return not (self.run_filter_once_per_request and index > 0)
