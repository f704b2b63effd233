"""Command-line entry points.

oslo.messaging imports oslo.service, whose eventlet backend warns at import
time that eventlet is deprecated. This service never uses eventlet (its RPC
server runs threads), so the warning would only mislead operators.

For the same reason eventlet's green DNS resolver is switched off before
anything imports eventlet (oslo.messaging and futurist do whenever it is
installed): it is only used by monkey-patched sockets, which this service
never has, and importing it imports dnspython, ~8 MB of every worker's
resident memory (doc/performance.md). An operator's own setting wins.
"""
import os
import warnings

os.environ.setdefault('EVENTLET_NO_GREENDNS', 'yes')

warnings.filterwarnings('ignore', message=r'(?s).*Eventlet is deprecated')
warnings.filterwarnings('ignore', category=DeprecationWarning, module=r'oslo_service\..*')
warnings.filterwarnings('ignore', category=DeprecationWarning,
                        module=r'oslo_utils\.eventletutils')
