"""The papers' tables as grid specs: each module's `FORMS` maps a form name
('cpu_small', 'paper') to a `tasks.grid.spec.Spec`."""
