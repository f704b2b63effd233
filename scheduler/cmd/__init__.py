"""Command-line entry points.

These processes run threads, never eventlet: the RPC server's executor is
``threading`` and nothing monkey-patches. Two libraries decide otherwise when
eventlet is merely installed (it is, beside Nova):

* oslo.service, which oslo.messaging imports, loads its eventlet backend unless
  told which one to use; it is told ``threading`` here, before anything imports it.
* futurist, which oslo.messaging also imports, imports eventlet to see whether it
  exists, and eventlet imports pyOpenSSL and cryptography whenever they are
  installed: ~20 MB of every worker's resident memory, for nothing
  (doc/performance.md). So eventlet is not importable while those libraries are
  first imported (they take it as absent, which for this process is the truth),
  and importable again afterwards, for an operator's Nova-style plugin that
  imports Nova, which imports eventlet.

For the same reason eventlet's green DNS resolver stays off (it imports
dnspython, ~8 MB) should something import eventlet later: it is only used by
monkey-patched sockets. An operator's own setting wins. The deprecation
warnings eventlet's import path prints would only mislead operators.
"""
import os
import sys
import warnings

os.environ.setdefault('EVENTLET_NO_GREENDNS', 'yes')

warnings.filterwarnings('ignore', message=r'(?s).*Eventlet is deprecated')
warnings.filterwarnings('ignore', category=DeprecationWarning, module=r'oslo_service\..*')
warnings.filterwarnings('ignore', category=DeprecationWarning,
                        module=r'oslo_utils\.eventletutils')


def _threads_only() -> None:
    # A process that imported these first (a test runner, Nova's functional
    # tests around the service) made its own choice.
    if any(name in sys.modules for name in ('eventlet', 'futurist', 'oslo_messaging')):
        return
    sys.modules['eventlet'] = None  # type: ignore[assignment]
    try:
        from oslo_service import backend
        try:
            backend.init_backend(backend.BackendType.THREADING)
        except ValueError:
            # oslo.service without its threading extra (cotyledon), as a distribution
            # may package it: its eventlet backend, eventlet and all, as before.
            return
        import futurist  # noqa: F401
        import oslo_messaging  # noqa: F401
    finally:
        del sys.modules['eventlet']


_threads_only()
