"""Reference ε for k Gaussian and k Laplace releases, computed with Google's
dp-accounting (RDP and PLD accountants), for tests/accounting_and_sensitivity.rs.

    pip install dp-accounting==0.6.0 && python3 dp_accounting_reference.py

Prints one Rust array row per case: (mechanism, parameter, k, rdp ε, pld ε),
δ = 1e-6. The parameter is σ/Δ for the Gaussian and b/Δ for the Laplace.
"""
import dp_accounting
from dp_accounting import pld, rdp

DELTA = 1e-6

def rdp_epsilon(event):
    accountant = rdp.RdpAccountant()
    accountant.compose(event)
    return accountant.get_epsilon(DELTA)

def pld_epsilon(event):
    accountant = pld.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(event)
    return accountant.get_epsilon(DELTA)

for name, make, params in [
    ("Gaussian", dp_accounting.GaussianDpEvent, [1.0, 5.0, 54.0]),
    ("Laplace", dp_accounting.LaplaceDpEvent, [10.0, 100.0]),
]:
    for p in params:
        for k in [1, 10, 100, 1000]:
            event = dp_accounting.SelfComposedDpEvent(make(p), k)
            print(f'    ("{name}", {p:.1f}, {k}, {rdp_epsilon(event):.6e}, {pld_epsilon(event):.6e}),')
