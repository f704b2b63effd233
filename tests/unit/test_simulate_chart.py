"""The plain-text utilisation chart: bars per resource class and hosts per usage band."""
from __future__ import annotations

from scheduler.simulate.report import ProviderUsage, render_chart, utilisation


def _host(name: str, vcpu: int, memory: int, disk: int = 0) -> ProviderUsage:
    return ProviderUsage(uuid=f'u-{name}', name=name,
                         capacity={'VCPU': 100, 'MEMORY_MB': 1000, 'DISK_GB': 10},
                         used={'VCPU': vcpu, 'MEMORY_MB': memory, 'DISK_GB': disk})


def test_the_class_bars_show_the_used_share_of_the_total_capacity():
    chart = render_chart(utilisation([_host('a', 50, 1000), _host('b', 0, 0)]), width=20)
    assert '  VCPU       [#####...............]  25%  50/200' in chart
    assert '  MEMORY_MB  [##########..........]  50%  1000/2000' in chart
    assert '  DISK_GB    [....................]   0%  0/20' in chart


def test_the_band_bars_count_hosts_and_scale_to_the_fullest_band():
    usages = [_host('a', 10, 900), _host('b', 10, 900), _host('c', 10, 100), _host('d', 60, 900)]
    lines = render_chart(utilisation(usages), width=8).splitlines()
    memory = lines[lines.index('  hosts by MEMORY_MB usage:') + 1:][:4]
    assert memory == ['      0-25% |### 1', '     25-50% | 0', '     50-75% | 0',
                      '    75-100% |######## 3']


def test_a_tiny_share_still_shows_one_mark_and_over_capacity_gets_its_own_band():
    usages = [_host('a', 1, 0), _host('b', 0, 0), _host('c', 0, 1200)]
    chart = render_chart(utilisation(usages), width=10)
    assert '  VCPU       [#.........]' in chart
    assert '      >100% |##### 1' in chart and chart.count('>100%') == 1


def test_the_chart_is_plain_ascii_without_terminal_codes():
    chart = render_chart(utilisation([_host('a', 30, 300, 3)]))
    assert chart.isascii()
    assert '\x1b' not in chart
