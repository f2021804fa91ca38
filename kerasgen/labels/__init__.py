"""Labels: what a generator's targets are. The label modes, `Targets` and the encoders of
class labels, multi-labels, raw values and masks (`encoding`), the label cells of tables
(`cells`), and a generator's targets built from its arguments, with the checks across
the generators of one fit (`targets`). This package is internal."""
