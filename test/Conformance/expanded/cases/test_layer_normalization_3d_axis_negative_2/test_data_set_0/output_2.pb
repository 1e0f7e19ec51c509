B	InvStdDevJ
¶?t«?