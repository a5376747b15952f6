"""How the weights move each epoch, the same in every layout: the learning-rate schedule
(``schedule``), the compute precision and fp16's loss scale (``precision``), and the update that
joins them with gradient clipping and Adam (``update``). Nothing here knows a process group: the
one number that needs every rank (the gradient norm) comes from the engine."""
