"""How a scenario runs iobench: where the binary is and the sizes it spells (`iobenchlib`), the
one place its command line is spelled (`runs`), the one reader of its JSON (`iobenchjson`) and
what a sweep keeps of a cell (`compact`), the experiment kernel (`experiment`), the axes every
scenario shares (`axes`), a result folder's kind (`resultfolder`), CPU of a command's every
process (`cgroup_cpu`) and the interpreter's modules (`needs`)."""
