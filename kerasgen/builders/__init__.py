"""Builders: what the public generators' constructors share. The argument checks, worker
processes and splits (`common`), image-file generators and their sources
(`image_files`), labels given for a folder (`folder_labels`) and tables of files
(`tables`). This package is internal: the public generators are in generators.py,
sql.py, tfrecord.py, arrayrecord.py, webdataset.py, stream.py, detection.py."""
