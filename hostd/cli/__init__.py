"""The commands and the parent side: ``hostd`` (``hostd.cli.hostd``: ``serve`` and its start path, which loads
``hostd.host`` by name after ``initialize`` is answered), ``hostctl`` (``hostd.cli.hostctl``: a parent for people and
scripts; its verbs in ``commands_plugins`` and ``commands_tools``, the hostd it drives in ``connection``, its output in
``render``, ``demo``) and the Python client both use (``hostd.cli.client``, re-exported as ``hostd.client``). May
import every layer below; nothing in hostd imports it.
"""
