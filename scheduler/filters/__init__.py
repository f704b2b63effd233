"""Host filters. ``from scheduler import filters`` then ``filters.BaseHostFilter`` mirrors
Nova's ``from nova.scheduler import filters``, so a Nova filter ports by its import line."""
from scheduler.filters.base import BaseHostFilter, FilterResult
from scheduler.filters.candidate import BaseCandidateFilter

__all__ = ['BaseCandidateFilter', 'BaseHostFilter', 'FilterResult']
