from irviz.cli import main

raise SystemExit(main())
