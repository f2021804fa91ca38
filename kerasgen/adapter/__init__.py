"""Adapter: what `base.Generator` (the PyDataset face) is made of beside itself. How its
stages are built (`assembly`), what users read of it (`readouts`), its views
(`views`), the hooks a subclass fills (`hooks`), validation measured as it is
(`validation`), and the forms Keras users feed (`tfdata`, `grain`, ImageDataGenerator's
iterator names: `iterator_names`). This package is internal."""
