"""The discretisation: from a geometry to a sparse linear system, one module per concern:

    mesh       the 1D line and the 3D box of hexahedra: nodes, elements, faces
    element    the tri-linear hexahedron: shape functions, Gauss quadrature, element matrices
    assembly   the finite-element systems of 01_fem1d and 02_fem3d: pattern, assembly, Dirichlet
               and flux conditions, exact and manufactured solutions, errors
    fvm        the finite-volume Poisson problem of the seeds (03_openmp, 04_iccg): generator,
               storage formats, INPUT.DAT
    vtk        the box and its nodal fields for ParaView: VTK XML (.vtu) or legacy VTK (.vtk)

Each builds matrices in course.sparse's formats with the kernels of course.native; nothing here
solves (course.solvers) or times (course.timing).
"""
