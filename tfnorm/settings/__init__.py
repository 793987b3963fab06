"""Settings declared once: the mechanism every settings dataclass of tfnorm
shares (`tfnorm train`'s `TrainConfig`, `tfnorm compare`'s `CompareConfig`,
`tfnorm predict`'s and `tfnorm generate`'s settings).

* `setting`: `Setting`, one field's declaration (help, group, reader, resume
  class, the workloads that read it), and `setting(...)`, the dataclass
  field that carries it;
* `readers`: the readers a declaration names (`integer`, `number`,
  `choice`, `boolean`, paths, ...), each `read(key, value)` returning the
  value checked or raising `ValueError` naming the key and the value;
* `declared`: `DeclaredSettings`, the base that reads a dict, checks every
  value with its reader, and refuses a setting the chosen workload does not
  read;
* `config_error`: `ConfigError`, the one error of a bad setting.

The command line's flags are generated from the declarations
(`tfnorm.cli.flags`). Nothing here imports TensorFlow, or any other tfnorm
package but the error helpers and the value checks at the bottom.
"""
