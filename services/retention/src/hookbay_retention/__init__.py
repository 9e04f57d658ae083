"""hookbay retention job: prunes events and attempts per plan"""
