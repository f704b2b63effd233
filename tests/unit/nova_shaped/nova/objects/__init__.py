registered = []


def register_all():
    registered.append(True)


class RequestSpec:
    """Only what the plugins of test_nova_plugins.py read, rebuilt from the primitive."""

    @classmethod
    def obj_from_primitive(cls, primitive):
        assert primitive['nova_object.name'] == 'RequestSpec'
        spec = cls()
        data = primitive['nova_object.data']
        spec.project_id = data['project_id']
        spec.scheduler_hints = data.get('scheduler_hints') or {}
        return spec

    def get_scheduler_hint(self, name, default=None):
        values = self.scheduler_hints.get(name)
        return values[0] if values else default
