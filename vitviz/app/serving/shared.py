"""What every visitor and API caller may share: a result computed once for one model and one image.

Thirty visitors of a class open the page on the same example, and an API caller who explores one image sends
it again with each new token, layer or head: each of those used to run the model and draw every picture anew.
`SHARED` keeps a result (a tab's analysis, an image decoded) by what it depends on, for everyone
(vitviz.runtime.shared.SharedResults):

- keyed by the model record itself (held weakly) and the rest of the key (the image file's digest, the class,
  ...), so a result is only ever handed to a call that would have computed the very same thing;
- bounded by the memory the results hold, `VITVIZ_SHARED_MB`; the pictures drawn from them are kept apart
  (vitviz.pictures.drawn), bounded by `VITVIZ_PICTURES_MB`;
- the results are read, never changed, by the pictures drawn from them: a reply is what the same call gets alone.
"""

from __future__ import annotations

from vitviz.app.serving import limits
from vitviz.pictures import drawn
from vitviz.runtime.shared import NO_OWNER, SharedResults, nbytes_of

__all__ = ["NO_OWNER", "SHARED", "nbytes_of"]

SHARED = SharedResults(lambda: limits.get("VITVIZ_SHARED_MB"))
drawn.PICTURES.bound = lambda: limits.get("VITVIZ_PICTURES_MB")
