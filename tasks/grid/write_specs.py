"""Writes a grid's run specs, reading each run's flags as its binary does.

  python -m tasks.grid.write_specs REQUEST.json

The grid runner's helper (`tasks.grid.run_specs.with_specs`) for a binary of
your own (a repository task's binary is read in the runner's process,
`task_registry.spec_from_args`), a process of its own because such a binary
defines its flags in absl's global `FLAGS`, where the runner's `--rounds`
and `--output_dir` already are. REQUEST is
`{"binary": module, "runs": [{"name", "args", "spec_file"}, ...]}`. For a
binary whose `main` reads specs (`tasks.common.binary.TrainingMain`: every
training binary here) each run's `args` are read into its spec, all before
any is written, and each spec is written to its `spec_file` (whole: written
aside and renamed); what the binary says as it reads them (a preset's
duration, `--use_synthetic_data`'s warning) comes out once per line, then
`specs`. Another binary (a script
of one's own taking `--rounds`, `--seed` and `--output_dir`) is given its
flags: the line is `flags` and nothing is written. A run whose flags are
wrong (or a binary that does not import) is one line on stderr naming the
run and the flag (or the binary), exit 1, and no file written.
"""

import contextlib
import importlib
import io
import json
import os
import sys

from absl import app
from absl import flags


def main(argv) -> int:
  if len(argv) != 2:
    print('usage: python -m tasks.grid.write_specs REQUEST.json',
          file=sys.stderr)
    return 2
  with open(argv[1]) as f:
    request = json.load(f)
  try:
    binary = importlib.import_module(request['binary'])
  except ImportError as e:
    print(f'binary {request["binary"]}: {e}', file=sys.stderr)
    return 1
  spec_of = getattr(getattr(binary, 'main', None), 'spec_of', None)
  if spec_of is None:
    print('flags')
    return 0
  texts, said = [], io.StringIO()
  with contextlib.redirect_stderr(said):  # The binary's notes, once each.
    for run in request['runs']:
      try:
        texts.append(spec_of(run['args']).to_json())
      except (flags.Error, app.UsageError, ValueError, TypeError) as e:
        error = f'run {run["name"]}: {" ".join(str(e).split())}'
        break
    else:
      error = None
  if error is not None:
    print(error, file=sys.stderr)
    return 1
  for note in dict.fromkeys(
      line.strip() for line in said.getvalue().splitlines() if line.strip()):
    print(note)
  write_files([(run['spec_file'], text)
               for run, text in zip(request['runs'], texts)])
  print('specs')
  return 0


def write_files(files) -> None:
  """Each `(path, text)` written whole (aside, then renamed), its directory
  made; call once every text is known, so a refused run writes none."""
  from tff_mixed.driver import layout  # pylint: disable=g-import-not-at-top
  for path, text in files:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    layout.write_atomically(path, lambda f, text=text: f.write(text + '\n'))


if __name__ == '__main__':
  sys.exit(main(sys.argv))
