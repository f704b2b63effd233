"""keystoneauth1 option groups (``[placement]``, ``[nova]``, ``[neutron]``), registered and
loaded the way Nova does."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import token_endpoint
from oslo_config import cfg

from scheduler.exceptions import ConfigurationError


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


def load_adapter(conf: cfg.ConfigOpts, group: str) -> ks_adapter.Adapter:
    """The keystoneauth1 Adapter ``[group]`` describes; ConfigurationError if it cannot load."""
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
    except (ks_exc.ClientException, cfg.Error) as e:
        raise ConfigurationError(f'[{group}] auth plugin cannot be loaded: {e}') from e
    if isinstance(auth, token_endpoint.Token) and not auth.token:
        raise ConfigurationError(f'[{group}] auth_type = admin_token needs [{group}] token')
    try:
        session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
        return ks_loading.load_adapter_from_conf_options(
            conf, group, session=session, auth=auth, raise_exc=False,
            client_name='placement-scheduler')
    except (TypeError, ValueError, ks_exc.ClientException) as e:
        raise ConfigurationError(f'[{group}] invalid session/adapter options: {e}') from e
