"""Command-line entry points.

oslo.messaging imports oslo.service, whose eventlet backend warns at import
time that eventlet is deprecated. This service never uses eventlet (its RPC
server runs threads), so the warning would only mislead operators.
"""
import warnings

warnings.filterwarnings('ignore', message=r'(?s).*Eventlet is deprecated')
warnings.filterwarnings('ignore', category=DeprecationWarning, module=r'oslo_service\..*')
warnings.filterwarnings('ignore', category=DeprecationWarning,
                        module=r'oslo_utils\.eventletutils')
