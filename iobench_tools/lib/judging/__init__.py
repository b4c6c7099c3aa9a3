"""Deciding between cells: intervals and tests (`statslib`), which cells are the same work
(`samework`), the cost model from the counts (`costmodel`), what carries over inside a round
(`carryover`)."""
