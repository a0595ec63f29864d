"""Where each masked span of SpanBERT's begins and ends: the tokens its boundary objective reads."""


def span_boundaries(positions, length):
    """SpanBERT's boundary tokens for each masked position (span-boundary objective).

    A span is a maximal run of consecutive masked positions (adjacent spans merge, as
    SpanBERT's `merge_intervals` does). Each position in a span [s, e] is predicted from the
    tokens at s - 1 and e + 1 and its offset i - s inside the span.

    Args:
      positions: sorted masked positions of one example.
      length: the example's length (its tokens are at 0 .. length - 1).

    Returns:
      (left, right, offset) lists aligned with `positions`; left is -1 and right is `length`
      where the span touches the sequence edge (no outside token: the reference skips those).
    """
    left, right, offset = [], [], []
    start = 0
    for index, position in enumerate(positions):
        if index == 0 or position != positions[index - 1] + 1:
            start = index
        end = index
        while end + 1 < len(positions) and positions[end + 1] == positions[end] + 1:
            end += 1
        left.append(positions[start] - 1)
        right.append(positions[end] + 1)
        offset.append(position - positions[start])
    return left, right, offset
