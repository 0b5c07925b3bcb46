"""The one exception for requests a user must change: a bad flag, value, path or file.

Code anywhere in jaxgrid raises :class:`UserError` when the request itself cannot be carried
out (a run directory in use or holding another run, no intact checkpoint, a missing
optional extra); its message is one line that names what to change. The ``jaxgrid``
command prints it as ``jaxgrid: error: <message>`` and exits with status 2, without a
traceback. Anything else that goes wrong is a bug and keeps its traceback.
"""


class UserError(Exception):
    """A request that cannot be carried out as given; the message says what to change."""
