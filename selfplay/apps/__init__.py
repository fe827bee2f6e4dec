"""Applications: the terminal game (`play`), the Saiblo ladder player (`saiblo`) and the
browser board (`web`)."""
