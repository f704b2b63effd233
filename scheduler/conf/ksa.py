"""keystoneauth1 option groups (``[placement]``, ``[nova]``), registered the way Nova does."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg


def register_ksa_group(conf: cfg.ConfigOpts, group: cfg.OptGroup, own_opts: Sequence[cfg.Opt],
                       adapter_defaults: Mapping[str, Any]) -> None:
    """Our options plus keystoneauth's session, auth and adapter options in ``group``."""
    # A fresh OptGroup for every ConfigOpts: oslo.config registers only a shallow
    # copy of the group, so a shared module-level one would make every ConfigOpts
    # share (and leak) option overrides.
    conf.register_group(cfg.OptGroup(group.name, title=group.title, help=group.help))
    conf.register_opts(own_opts, group=group.name)
    ks_loading.register_session_conf_options(conf, group.name)
    ks_loading.register_auth_conf_options(conf, group.name)
    ks_loading.register_adapter_conf_options(conf, group.name, include_deprecated=False)
    for name, value in adapter_defaults.items():
        conf.set_default(name, value, group=group.name)


def list_ksa_opts(group: cfg.OptGroup, own_opts: Sequence[cfg.Opt],
                  adapter_defaults: Mapping[str, Any]) -> dict[cfg.OptGroup, list[cfg.Opt]]:
    """The same options for oslo-config-generator, with the password plugin's as example."""
    # keystoneauth builds new option objects on every call, so the defaults set
    # in register_ksa_group() must be applied again for the sample to show them.
    adapter_opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    cfg.set_defaults(adapter_opts, **adapter_defaults)
    return {
        group: (
            list(own_opts)
            + ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options('password')
            + adapter_opts
        )
    }
