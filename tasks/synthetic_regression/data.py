"""NIID synthetic data of seed 002 (Dalal): two-client linear regression and
Synthetic(gamma, epsilon) classification.

* Linear regression, §2.4 Eq. 2.12: client i draws X_i ~ N(mu_i, sigma_i)
  (sigma_i a standard deviation; the thesis does not say), noise
  e ~ N(0, 1) and Y_i = alpha_i X_i + beta_i + e, 100 points each. mu and
  sigma shift the features, alpha and beta the concept. The parameter sets
  of Eq. 2.18 and 2.20-2.23 are below; the free ones (mu_1, sigma_1 or
  alpha_1, beta_1) are what Fig. 2.6-2.7 vary.
* One-shot averaging (Eq. 2.14-2.19): the average of the clients' models
  against the least-squares line of the pooled data (alpha*, beta*),
  Omega = ||(alpha*, beta*) - (mean alpha_i, mean beta_i)||_2.
* Synthetic(gamma, epsilon), §2.5.4 Algorithm 2 (Li et al.'s generator):
  per client u ~ N(0, gamma), B ~ N(0, epsilon), v ~ N(B, 1) per feature,
  W ~ N(u, 1) (F x L), b ~ N(u, 1) (L), x ~ N(v, Sigma) with
  Sigma = diag(f^-1.2), y = argmax(x W + b). gamma and epsilon are
  variances. As the algorithm is written, gamma moves W and b (the concept)
  and epsilon moves v (the features); the thesis's prose names them the
  other way round. F = 60 and L = 10 are Li et al.'s (the thesis gives no
  sizes).
"""

import dataclasses
from collections.abc import Sequence
from typing import Union

import numpy as np


@dataclasses.dataclass(frozen=True)
class RegressionClient:
  """Eq. 2.12's parameters of one client."""
  mu: float
  sigma: float
  alpha: float
  beta: float

  def __post_init__(self):
    if not self.sigma > 0:
      raise ValueError(f'sigma must be > 0, got {self.sigma}.')


# Eq. 2.18 (the data of §2.6's FedAvg experiments).
EQ_2_18 = (RegressionClient(1.0, 1.0, 3.0, -4.0),
           RegressionClient(0.0, 1.0, 2.0, 5.0))
# Fig. 2.6 (mu_1, sigma_1 vary): Eq. 2.20 no concept drift, Eq. 2.21 some.
EQ_2_20 = (RegressionClient(0.0, 1.0, 1.0, 2.0),
           RegressionClient(0.0, 1.0, 1.0, 2.0))
EQ_2_21 = (RegressionClient(0.0, 1.0, 5.0, -2.0),
           RegressionClient(0.0, 1.0, 2.0, -5.0))
# Fig. 2.7 (alpha_1, beta_1 vary): Eq. 2.22 no feature shift, Eq. 2.23 some.
EQ_2_22 = (RegressionClient(0.0, 1.0, 0.0, 0.0),
           RegressionClient(0.0, 1.0, -10.0, 10.0))
EQ_2_23 = (RegressionClient(1.0, 1.0, 0.0, 0.0),
           RegressionClient(10.0, 20.0, -10.0, 10.0))
PARAMETER_SETS = {'eq_2_18': EQ_2_18, 'eq_2_20': EQ_2_20, 'eq_2_21': EQ_2_21,
                  'eq_2_22': EQ_2_22, 'eq_2_23': EQ_2_23}
NUM_POINTS = 100


def sample_regression(
    clients: Sequence[RegressionClient], *, num_points: int = NUM_POINTS,
    seed: Union[int, np.random.Generator] = 0,
) -> list[tuple[np.ndarray, np.ndarray]]:
  """Eq. 2.12: one (x, y) pair of float64 arrays per client."""
  if num_points < 2:
    raise ValueError(f'num_points must be >= 2, got {num_points}.')
  rng = np.random.default_rng(seed)
  data = []
  for client in clients:
    x = rng.normal(client.mu, client.sigma, num_points)
    y = client.alpha * x + client.beta + rng.normal(0.0, 1.0, num_points)
    data.append((x, y))
  return data


def least_squares(data: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
  """Eq. 2.17: (alpha*, beta*) of the pooled data."""
  x = np.concatenate([d[0] for d in data])
  y = np.concatenate([d[1] for d in data])
  design = np.stack([x, np.ones_like(x)], axis=1)
  solution, *_ = np.linalg.lstsq(design, y, rcond=None)
  return solution


def one_shot_divergence(
    clients: Sequence[RegressionClient], *, num_points: int = NUM_POINTS,
    seed: Union[int, np.random.Generator] = 0, fitted: bool = False,
) -> float:
  """Eq. 2.19: Omega = ||(alpha*, beta*) - one-shot average||_2.

  The one-shot average is that of the clients' generative (alpha_i, beta_i)
  (Eq. 2.14, as the thesis takes them known), or with `fitted=True` that of
  each client's own least-squares fit.
  """
  data = sample_regression(clients, num_points=num_points, seed=seed)
  if fitted:
    average = np.mean([least_squares([d]) for d in data], axis=0)
  else:
    average = np.mean([[c.alpha, c.beta] for c in clients], axis=0)
  return float(np.linalg.norm(least_squares(data) - average))


def with_client_1(clients: Sequence[RegressionClient], **changes):
  """The parameter set with client 1's fields replaced (a grid point)."""
  return (dataclasses.replace(clients[0], **changes), *clients[1:])


@dataclasses.dataclass(frozen=True)
class ClassificationClient:
  x: np.ndarray  # (n, F) float32
  y: np.ndarray  # (n,) int32


def synthetic_classification(
    gamma: float, epsilon: float, *, num_clients: int = 30,
    num_samples: Union[int, Sequence[int]] = 100, num_features: int = 60,
    num_classes: int = 10, seed: Union[int, np.random.Generator] = 0,
) -> list[ClassificationClient]:
  """Synthetic(gamma, epsilon): see the module docstring.

  Args:
    gamma: Variance of each client's u (its W and b): concept.
    epsilon: Variance of each client's B (its feature means v): features.
    num_clients: Clients.
    num_samples: Examples per client, one int or one per client.
    num_features: F.
    num_classes: L.
    seed: Seed or generator.
  """
  for name, value in (('gamma', gamma), ('epsilon', epsilon)):
    if not value >= 0:
      raise ValueError(f'{name} must be >= 0, got {value}.')
  if isinstance(num_samples, int):
    num_samples = [num_samples] * num_clients
  if len(num_samples) != num_clients or min(num_samples) < 1:
    raise ValueError(
        f'num_samples must be >= 1 for each of the {num_clients} clients.')
  rng = np.random.default_rng(seed)
  scale = np.arange(1, num_features + 1, dtype=np.float64)**-1.2
  clients = []
  for n in num_samples:
    u = rng.normal(0.0, np.sqrt(gamma))
    b_mean = rng.normal(0.0, np.sqrt(epsilon))
    v = rng.normal(b_mean, 1.0, num_features)
    w = rng.normal(u, 1.0, (num_features, num_classes))
    b = rng.normal(u, 1.0, num_classes)
    x = rng.normal(v, np.sqrt(scale), (n, num_features))
    y = np.argmax(x @ w + b, axis=1)
    clients.append(ClassificationClient(x.astype(np.float32),
                                        y.astype(np.int32)))
  return clients
